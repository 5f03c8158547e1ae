"""Command-line programs: uop-opt."""
