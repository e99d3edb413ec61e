"""Drafters: small, cheap proposers of text that the target then verifies. See ``ds4spec.core.drafting.Drafter``."""
