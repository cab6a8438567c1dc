"""The 'More controls' disclosure a lesson's form holds (issue 36, item 5), read off its page."""


def more_controls(client, path: str, form_id: str, query: str = "") -> str:
    """The inside of the form's <details class="more-controls"> tag and body, from ' id=...'."""
    html = client.get(f"{path}{query}").text
    form = html.split(f'id="{form_id}"')[1].split("</form>")[0]
    return form.split('<details class="more-controls"')[1].split("</details>")[0]
