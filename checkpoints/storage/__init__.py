"""How checkpoint values are laid out in storage, independent of any database.

Backends persist `Row`s (key, prev, data) and checkpoint headers; everything else here is
pure Python: planning a write against its parent, loading and verifying, encryption.
"""
