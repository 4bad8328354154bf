"""One target under atheris: ``python -m fuzz.run TARGET [libFuzzer flags] [CORPUS_DIR]``.

The project's modules are imported instrumented, so libFuzzer is guided by their coverage. The
process ends when libFuzzer does: 0 when its time is up, non-zero on a crash (the input is saved
where ``-artifact_prefix`` says).
"""

from __future__ import annotations

import logging
import sys

import atheris

with atheris.instrument_imports(include=["protocol", "zkstore", "fuzz"]):
    from fuzz.targets import TARGETS


def main() -> None:
    logging.disable(logging.CRITICAL)  # the znode decoders log every input they refuse
    name = sys.argv[1]
    atheris.Setup([sys.argv[0], *sys.argv[2:]], TARGETS[name])
    atheris.Fuzz()


if __name__ == "__main__":
    main()
