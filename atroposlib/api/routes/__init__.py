"""The API's routers, one file per concern; ``create_app`` includes them."""
