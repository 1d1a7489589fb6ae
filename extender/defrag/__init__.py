"""Defragmentation as the service runs it: the planner's inputs from the ledger, the plan's JSON and
text, the holds that steer replacements, and the opt-in loop that evicts (see docs/defrag.md)."""
