"""Reading XML safely and locating elements in the original bytes."""
