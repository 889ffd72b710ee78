"""GitHub's REST API by area: each module holds one area's handlers and its ROUTES, which the server wires."""
