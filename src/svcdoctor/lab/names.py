"""The names of the lab's Service, as its objects and logs spell them."""

NAMESPACE = "lab"
SERVICE = "api"
SERVICE_PORT = 80
UPSTREAM = f"{NAMESPACE}-{SERVICE}-{SERVICE_PORT}"  # ingress-nginx's $proxy_upstream_name
