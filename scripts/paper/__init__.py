"""Helpers of scripts/reproduce_paper.py (issue #6): one module per stage, plus the shared pieces (common.py)
and the report (report.py). Every stage writes only measured rows; published figures are joined at report time."""
