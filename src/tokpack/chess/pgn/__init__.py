"""PGN in, UCI out: PGN files and Lichess's Parquet games read as streams, their SAN main lines resolved to UCI, converted to monthly parquet tables."""
