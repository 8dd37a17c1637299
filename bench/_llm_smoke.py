"""What the LLM benches share: the prompted smoke classifier (it lives in `engine.smoke`) and their start. Not an
entry (leading underscore)."""
from engine.smoke import tiny_prompted, use_scratch_folders  # noqa: F401 (tiny_prompted: re-exported)


def start_bench(smoke: bool) -> None:
    """An LLM bench's start: the engine's settings applied (`engine.runtime.configure`), torch on one thread (they
    time one thread's CPU), and in smoke mode the scratch folders (`engine.smoke.use_scratch_folders`)."""
    import torch

    from engine.runtime import configure

    configure()
    torch.set_num_threads(1)
    if smoke:
        use_scratch_folders()
