"""The resident-memory figures the training peers share (lstm_lm_torch.py, txl_torch.py,
nmt_torch.py), measured as define's benchmarks measure their own side (bench/peer_bench_util.h,
TrainingRss):

  peak_rss_bytes                 the whole process's peak resident set (VmHWM): the interpreter and
                                 libtorch included, about 0.5 GiB whatever the model;
  pre_training_rss_bytes         the resident set just before the first training step (model,
                                 optimizer and data built);
  peak_above_pre_training_bytes  the peak above it: what training itself added.

The high-water mark is reset right before the first step by writing "5" to /proc/self/clear_refs
(Linux 4.0 and later; it resets VmHWM and ru_maxrss to the current resident set), and the peak
before the reset is kept for the whole-process figure. Where the reset is refused the last two
fields are null.

  window = peak_memory.TrainingWindow()   # right before the first training step
  ...                                     # training (and whatever else the run measures)
  print(json.dumps({..., **window.fields()}))
"""


def _status_kib(field):
    """A "Vm...:   1234 kB" line of /proc/self/status in KiB; 0 where there is none."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def peak_rss_bytes():
    return _status_kib("VmHWM") * 1024


class TrainingWindow:
    def __init__(self):
        self.peak_before = peak_rss_bytes()
        self.start = None
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
        except OSError:
            return
        # Right after a reset the high-water mark is the current resident set.
        self.start = peak_rss_bytes()

    def fields(self):
        hwm = peak_rss_bytes()
        return {"peak_rss_bytes": max(self.peak_before, hwm),
                "pre_training_rss_bytes": self.start,
                "peak_above_pre_training_bytes": None if self.start is None else max(0, hwm - self.start)}
