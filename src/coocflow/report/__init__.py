"""Self-contained HTML reports of run and sweep folders (`coocflow report`)."""

from coocflow.report.html import run_report, sweep_report
from coocflow.report.write import write_report

__all__ = ["run_report", "sweep_report", "write_report"]
