"""Decisions from the analyses: the policy's rule table, the recommendations, the CI gate."""
