"""A wire-level Modal test server: the real, unpatched `modal` SDK talks gRPC to it.

It implements the control plane (`modal.client.ModalClient`, control_plane.py) and the task command
router (`modal.task_command_router.TaskCommandRouter`, router.py) as far as our code path needs
them, behind the SDK's own generated stubs, the way Modal tests its client against a servicer.
Sandboxes are real bubblewrap containers (containers.py, agent.py as their pid 1, fs_tools.py as
their `modal-sandbox-fs-tools`); the cloud's state lives on disk (state.py). Start it with
fixture.running_modal_server, or the session fixture `modal_server` (tests/support/modal_server.py).
"""
