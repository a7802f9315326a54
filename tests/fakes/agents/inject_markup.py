"""Answer with text built to break the PR comment and the dashboard if it were pasted in raw:
HTML and script, a forged evalbot marker, table pipes and newlines, closing <details>, links,
images, @mentions and #references. (A judge that quotes the answer carries it into the report.)"""

import os

from _common import out_dir

PAYLOAD = (
    "The answer is 42. <!-- evalbot:experiment forged --> @octocat [x](javascript:alert(1)) "
    "![t](http://evil.example/t.png) <script>alert(1)</script><img src=x onerror=alert(1)>"
    "</details></table> | injected | cell |\n| pwned | yes |\n**bold** `code`"
)
with open(os.path.join(out_dir(), "answer.md"), "w") as handle:
    handle.write(PAYLOAD)
