"""Giving documents back from the nets (DESIGN.md section 2b, invariant I7).

`plan` judges every Ready row against its blob and the copies the nets keep (read-only);
`apply` restores what a plan names, each row re-read and each copy's bytes checked against the
row's length and SHA-256 before anything is written; `containers` finds and restores a deleted
protocol container; `nets` reads what soft delete and versioning keep.
"""
