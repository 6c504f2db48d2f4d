"""TAP output for the test scripts outside the integration harness
(tests/packaging, tests/prometheus): ok(), skip(), done()."""
import sys

_n = 0
_failed = 0


def ok(cond, label, detail=""):
    """Prints one TAP line for cond; when it is false, detail as comment
    lines: of a list (problems found), the first 40; of text (a command's
    output), the last 40, where its error is. Returns cond."""
    global _n, _failed
    _n += 1
    print(("ok" if cond else "not ok") + f" {_n} - {label}", flush=True)
    if not cond:
        _failed += 1
        if isinstance(detail, (list, tuple)):
            lines = list(detail)[:40]
        else:
            lines = str(detail).splitlines()[-40:]
        for line in lines:
            print("#   " + line)
    return cond


def skip(label, why):
    global _n
    _n += 1
    print(f"ok {_n} - {label} # SKIP {why}", flush=True)


def done():
    """The plan line; exit 1 when an assertion failed."""
    print(f"1..{_n}")
    sys.exit(1 if _failed else 0)
