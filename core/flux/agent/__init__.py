"""The recording agent runtime: client/session SDK, ops, approver, adaptive loop, providers."""
