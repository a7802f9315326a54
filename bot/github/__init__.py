"""GitHub I/O: authentication (App or token), the REST calls the bot makes, Temporal activities."""
