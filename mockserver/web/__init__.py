"""The Flask app: /e through WSGI, the control API, the dashboard, the guard, the proxy."""
