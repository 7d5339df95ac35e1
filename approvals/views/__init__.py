"""Pages, by topic. Views are thin: selectors read, actions write."""
