"""What moved between two verdict snapshots (`verdict_snapshot.py`): structure, verdicts (every
boolean or None), numbers (largest relative change, overall and among values above 1e-12) and
sentences. Exits 1 when a verdict or the structure changed."""
import json, math, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
verdict_changes, string_diffs, worst, structure = [], [], [], []
def walk(x, y, path):
    if isinstance(x, dict) and isinstance(y, dict):
        if set(x) != set(y):
            structure.append((path, sorted(set(x) ^ set(y))))
        for k in set(x) & set(y):
            walk(x[k], y[k], f"{path}/{k}")
    elif isinstance(x, list) and isinstance(y, list):
        if len(x) != len(y):
            structure.append((path, f"len {len(x)} != {len(y)}"))
        for i, (u, v) in enumerate(zip(x, y)):
            walk(u, v, f"{path}[{i}]")
    elif isinstance(x, bool) or isinstance(y, bool) or x is None or y is None:
        if x != y:
            verdict_changes.append((path, x, y))
    elif isinstance(x, (int, float)) and isinstance(y, (int, float)):
        if x == y or (isinstance(x, float) and math.isnan(x) and isinstance(y, float) and math.isnan(y)):
            return
        rel = abs(x - y) / max(abs(x), abs(y), 1e-300)
        worst.append((rel, path, x, y))
    elif x != y:
        string_diffs.append((path, x, y))
walk(a, b, "")
worst.sort(reverse=True)
print("structure changes:", structure[:10])
print("verdict/None/bool changes:", len(verdict_changes)); [print("  ", v) for v in verdict_changes[:20]]
print("numbers that differ:", len(worst), "max relative", worst[0][0] if worst else 0)
for w in worst[:12]: print("  ", w)
print("strings that differ:", len(string_diffs))
for s in string_diffs[:8]: print("  ", s[0], "\n     ", str(s[1])[:160], "\n     ", str(s[2])[:160])
big = [w for w in worst if max(abs(w[2]), abs(w[3])) > 1e-12]
print("numbers above 1e-12 in size that differ:", len(big), "max relative", big[0][0] if big else 0)
for w in big[:15]: print("  ", w)
sys.exit(1 if verdict_changes or structure else 0)
