"""Business logic of the approvals app, by topic. Views, consumers and tasks call only these."""
