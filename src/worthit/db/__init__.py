"""Database connections: SQLite and PostgreSQL behind one `Store` protocol, their
pragmas and pools, the migration machinery every store's schema goes through, and how a
Redis client remembers an outage. No table of any store is defined here."""
