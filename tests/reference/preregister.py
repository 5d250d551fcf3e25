"""Write src/coocflow/verify/paper/preregistration.json from the live rules, keeping its `changes` and each
entry's `fixed_in` where the entry is unchanged; a changed entry (and any entry when the record is
first written, from git: the newest commit whose diff adds its defining text) gets "uncommitted",
to be replaced by the commit's hash once it is made. A maintainer's tool: run it
in the commit that changes a rule, then add that change's entry (what, why, verdicts before and after)
by hand. `python tests/reference/preregister.py`."""

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

from coocflow.verify.paper.preregistration import RECORD, registered, registration

ROOT = Path(__file__).resolve().parents[2]
PATH = ROOT / "src" / "coocflow" / "verify" / "paper" / RECORD


def introduced(pattern: str, path: str) -> str:
    """The newest commit that added a line matching `pattern` (a regex) to `path`, else "uncommitted"."""
    found = subprocess.run(["git", "log", "-G", pattern, "--format=%h", "--", path], cwd=ROOT,
                           capture_output=True, text=True).stdout.split()
    for commit in found:
        diff = subprocess.run(["git", "show", "--format=", commit, "--", path], cwd=ROOT, capture_output=True, text=True).stdout
        if any(re.search(pattern, line[1:]) for line in diff.splitlines() if line.startswith("+")):
            return commit
    return "uncommitted"


def main() -> None:
    old = json.loads(PATH.read_text()) if PATH.exists() else {"thresholds": {}, "claims": [], "changes": []}
    live = registration()
    thresholds = {}
    for name, value in live["thresholds"].items():
        kept = old["thresholds"].get(name)
        if kept is not None and kept["value"] == value:
            thresholds[name] = kept
            continue
        if kept is not None:
            thresholds[name] = {"value": value, "fixed_in": "uncommitted"}
            continue
        module, constant = name.split(".")
        thresholds[name] = {"value": value, "fixed_in": introduced(rf"^{constant} = ", f"src/coocflow/verify/paper/{module}.py")}
    kept_claims = {c["id"]: c for c in old["claims"]}
    claims = []
    for claim in live["claims"]:
        entry = kept_claims.get(claim["id"], {})
        kept_rates = {json.dumps(registered(r), sort_keys=True): r for r in entry.get("rates", [])}
        rates = []
        for rate in claim["rates"]:
            same = kept_rates.get(json.dumps(rate, sort_keys=True))
            rates.append(same if same is not None else {**rate, "fixed_in": "uncommitted" if entry else introduced(
                re.escape(f'"{rate["quantity"]}"'), "src/coocflow/verify/paper/claims.py")})
        same_rest = all(entry.get(key) == claim[key] for key in ("premises", "unstated", "checks"))
        fixed_in = entry["fixed_in"] if same_rest and "fixed_in" in entry else "uncommitted" if entry else introduced(
            re.escape(f'Claim("{claim["id"]}"'), "src/coocflow/verify/paper/claims.py")
        claims.append({"id": claim["id"], "premises": claim["premises"], "unstated": claim["unstated"],
                       "checks": claim["checks"], "fixed_in": fixed_in, "rates": rates})
    text = json.dumps({"thresholds": thresholds, "claims": claims, "changes": old.get("changes", [])}, indent=1)
    PATH.write_text(text + "\n")
    print(f"written: {PATH.relative_to(ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    main()
