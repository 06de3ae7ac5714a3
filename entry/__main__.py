import logging
import signal
import sys

from raycluster.sagemaker.stop_clock import StopClock

# First, before the heavy imports: this process is PID 1 of its container, and PID 1 ignores a SIGTERM that
# finds no handler, so one that came during the imports would be lost.
stop = StopClock()
for sig in (signal.SIGTERM, signal.SIGINT):
    signal.signal(sig, lambda *_: stop.set())

from raycluster.sagemaker.entrypoint import main  # noqa: E402

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
sys.exit(main(stop))
