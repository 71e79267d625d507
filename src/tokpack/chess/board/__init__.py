"""The chess board shared by reading PGN and by the schemes: pieces and squares, the rules of a legal move, results."""
