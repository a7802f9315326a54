"""An S3 endpoint that refuses every request as S3 does a bad key: `403 Forbidden`, with S3's XML
error body (`<Code>AccessDenied</Code>`) or none — enough for the blob store's start check to meet
a refusal over real HTTP (moto, the full S3 server of the other tests, accepts any credentials)."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler

from tests.fakes.http_server import FakeHttpServer

ACCESS_DENIED = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n'
    b"<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>"
)


class RefusingS3(FakeHttpServer):
    def __init__(self, body: bytes = ACCESS_DENIED) -> None:
        super().__init__()
        self.body = body
        self.requests: list[str] = []

    def handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def refuse(self) -> None:
                fake.requests.append(f"{self.command} {self.path}")
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                self.send_response(403)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(fake.body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(fake.body)

            do_GET = do_PUT = do_HEAD = do_DELETE = do_POST = refuse

            def log_message(self, *args: object) -> None:
                pass

        return Handler
