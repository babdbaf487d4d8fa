"""What a run or a project changed in the paths it may write (`tracker` is the way in):
snapshots through git where the path lies in a work tree, else file by file; every bound
in `limits`; what crosses the wire in `wire`."""

__all__ = ["tracker", "wire"]
