from raycluster.cli import run

run()
