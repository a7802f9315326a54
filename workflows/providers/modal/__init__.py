"""The `modal` provider: every run in a Modal Sandbox (docs/modal.md).

The provider (`modal_provider`) and what only it uses: admission control, file access through
Modal's filesystem API, image builds, worlds on Volumes, and the sandbox cost the engine records
(`modal_cost`). The image builder takes the provider as a Protocol (`ImageHost`), so the two do
not import each other. The Modal SDK itself is imported only when a provider is built from
settings.
"""

from workflows.providers.modal.modal_provider import ModalConfig, ModalProvider, ModalSandbox

__all__ = ["ModalConfig", "ModalProvider", "ModalSandbox"]
