"""Imports a PyTorch peer of define's benchmarks (bench/peers/<name>.py) as a module, so the
reference-equality scripts reuse its model instead of writing a second one."""
import importlib.util
import os
import sys

PEERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "peers")


def load(name):
    # The peers import their shared helpers (torch_device) from their own folder.
    if PEERS not in sys.path:
        sys.path.insert(0, PEERS)
    path = os.path.join(PEERS, name + ".py")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
