"""Plumbing every layer may use: atomic files, bounded JSON documents, terminal escaping."""
