"""The builders behind ``scripts/build_vendor.py``: one module per vendored dataset."""
