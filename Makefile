# Two set-up commands: `make demo` and `make test`. `make bench ARGS="--only recovery"` passes options on. Both create or refresh .venv first (fast when current).
# `make test-fast`: the edit-test loop (lint, then every test that neither trains nor starts Ray; tests/ray_guard.py
# fails a test that starts Ray unmarked).
SHELL := /bin/bash
VENV := .venv
# A working python3.12 first (a user's machine), else the newest 3.12 that pyenv has.
PYTHON312 := $(shell python3.12 -c '' 2>/dev/null && echo python3.12 || \
	{ v=$$(pyenv versions --bare 2>/dev/null | grep -E '^3\.12(\.[0-9]+)?$$' | tail -1); \
	  [ -n "$$v" ] && echo "$$(pyenv prefix $$v)/bin/python3.12"; })
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast lint bench venv sysdeps clean

venv: $(STAMP)

$(STAMP): pyproject.toml | sysdeps
	@test -n "$(PYTHON312)" || { echo "Python 3.12 is required (lerobot 0.6 needs >=3.12): install it or pyenv 3.12"; exit 1; }
	test -x $(VENV)/bin/python || $(PYTHON312) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[test]'
	touch $@

# System packages, where apt and root are at hand: the FFmpeg libraries LeRobot's video decoder
# (torchcodec) loads (without them every process logs a long traceback and falls back to PyAV), libGL for
# gym-pusht's OpenCV (the PushT rollouts), iproute2
# for `raycluster sim`, and Debian's chromium for the dashboard's browser test.
SYSTEM_PACKAGES := libavcodec59 libavformat59 libavutil57 libswscale6 libswresample4 libavfilter8 libavdevice59 \
	libgl1 iproute2 util-linux chromium
sysdeps:
	@if command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ] && ! dpkg -s $(SYSTEM_PACKAGES) >/dev/null 2>&1; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(SYSTEM_PACKAGES) >/dev/null; \
	fi

demo: venv
	$(VENV)/bin/raycluster demo --workdir outputs/demo

LINTED := raycluster entry jobs tests bench
lint: venv
	$(VENV)/bin/ruff check $(LINTED)
	$(VENV)/bin/ruff format --check $(LINTED)

# First every test that starts no Ray, two at a time (as test-fast); then the ones that train or start Ray, one at a
# time: two side by side (pytest-xdist) on this machine's 2 cores made a simulated job and a local training run
# each take 1.6-2.3 times as long, which wins little time and squeezes the tests' time bounds. Every test's
# duration goes to outputs/junit*.xml (the next cut is chosen from figures); the 15 slowest are printed.
test: lint
	$(VENV)/bin/python -m pytest -q -ra -n 2 -m "not slow and not cluster" --junitxml=outputs/junit-fast.xml
	$(VENV)/bin/python -m pytest -q -ra --durations=15 -m "slow or cluster" --junitxml=outputs/junit.xml

# Two at a time (pytest-xdist): none of these starts Ray, so any two may run side by side.
test-fast: lint
	$(VENV)/bin/python -m pytest -q -ra -n 2 -m "not slow and not cluster"

bench: venv
	$(VENV)/bin/python -m bench $(ARGS)

clean:
	rm -rf outputs .pytest_cache
