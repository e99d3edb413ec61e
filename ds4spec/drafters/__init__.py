"""Drafters: small, cheap proposers of text that the target then verifies. See ``base.Drafter``."""
