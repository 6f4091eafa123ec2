"""The pages committed to torchbisect's repository (`torchbisect pages`): what each is drawn from,
drawn again by today's code (committed.py)."""
