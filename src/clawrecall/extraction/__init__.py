"""Facts from conversation segments, as rules a model's answer is held to: the prompt (prompt.py),
the answer's JSON schema and its validation (schema.py), and what each fact does to the store
(decide.py). Pure functions: no store, no model; `engine/_facts.py` applies the decisions."""
