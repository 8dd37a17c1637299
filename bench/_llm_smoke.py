"""What the LLM benches share: the prompted smoke classifier (it lives in `engine.smoke`) and their start. Not an
entry (leading underscore)."""
from engine.smoke import tiny_prompted, use_scratch_folders  # noqa: F401 (tiny_prompted: re-exported)


def start_bench(smoke: bool, wall: bool = False):
    """An LLM bench's start: the engine's settings applied (`engine.runtime.configure`), torch on one thread (they
    time one thread's CPU), and in smoke mode the scratch folders (`engine.smoke.use_scratch_folders`).

    Returns:
        The clock to time with: wall time when `wall` (the benches' --wall), else this process's CPU time."""
    import time

    import torch

    from engine.runtime import configure

    configure()
    torch.set_num_threads(1)
    if smoke:
        use_scratch_folders()
    return time.perf_counter if wall else time.process_time
