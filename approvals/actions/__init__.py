"""Business logic of the approvals app, by topic: every write goes through these (views, the API,
consumers and tasks read through the selectors)."""
