"""/docs and /redoc in real Chromium with every request to another host blocked (the `page`
fixture records them and fails the test, Chromium resolves no other host): the viewers still
render the lab's operations."""

from playwright.sync_api import expect

# Redoc lays out the whole schema (thirteen labs' operations) before it shows anything: give
# it longer than expect()'s default 5 s on a loaded 2-core machine. A wait, not a timing check.
RENDER_MS = 30_000


def test_swagger_ui_renders_every_operation_offline(page, client):
    paths = client.get("/openapi.json").json()["paths"]
    page.goto("/docs")
    operations = page.locator("#swagger-ui .opblock")
    expect(operations.first).to_be_visible(timeout=RENDER_MS)
    expect(operations).to_have_count(sum(len(methods) for methods in paths.values()))
    for path, methods in paths.items():
        summary = page.locator(f'#swagger-ui .opblock-summary-path[data-path="{path}"]')
        expect(summary).to_have_count(len(methods))


def test_redoc_renders_the_operations_offline(page, client):
    paths = client.get("/openapi.json").json()["paths"]
    page.goto("/redoc")
    expect(page.locator("#redoc h1").first).to_contain_text("Parallelism Lab", timeout=RENDER_MS)
    for path in paths:
        # Redoc shows each operation's path in its request box.
        expect(page.locator("#redoc").get_by_text(path, exact=True).first).to_be_attached()
