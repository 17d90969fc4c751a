"""The dashboard's views, one module per area of the page (memories, a memory's detail,
the preview, suggestions, the account). Each acts for the signed-in user only."""
