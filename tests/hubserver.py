"""The local hub server the tests use: the one the rehearsal runs (repro/rehearse/hub.py)."""

from repro.rehearse.hub import LFS_SUFFIXES, Faults, HubServer, Repo, git_blob_sha1

__all__ = ["LFS_SUFFIXES", "Faults", "HubServer", "Repo", "git_blob_sha1"]
