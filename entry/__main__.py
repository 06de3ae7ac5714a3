import logging
import os
import signal
import sys
import time

from raycluster.sagemaker.stop_clock import StopClock

# First, before the heavy imports: this process is PID 1 of its container, and PID 1 ignores a SIGTERM that
# finds no handler, so one that came during the imports would be lost.
stop = StopClock()
for sig in (signal.SIGTERM, signal.SIGINT):
    signal.signal(sig, lambda *_: stop.set())

# Then the job's environment (restored, or installed once), before anything but the image's packages is imported.
from raycluster.environment.host import prepare_this_host  # noqa: E402
from raycluster.layout import SOURCE_DIR, sagemaker_base  # noqa: E402
from raycluster.sagemaker.failure import write_failure  # noqa: E402

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
started = time.monotonic()
try:
    prepare_this_host(os.environ, SOURCE_DIR)  # the code channel
except Exception as exc:  # no environment, no job: the reason goes where SageMaker shows it
    logging.getLogger("entry").error("the job's environment could not be made: %s", exc)
    write_failure(sagemaker_base(os.environ), f"the job's environment could not be made: {exc}")
    sys.exit(1)

from raycluster.sagemaker.entrypoint import main  # noqa: E402

sys.exit(main(stop, environment_s=time.monotonic() - started))
