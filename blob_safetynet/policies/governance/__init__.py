"""The rule set as Azure Policy: each expressible rule's definition and one initiative.

Standard library only, like the rules: the definitions are plain JSON documents built from the
rules' own thresholds (`forms.py`), written by `safetynet policy export` and registered by the
optional `SafetyNetGovernance` component.
"""
