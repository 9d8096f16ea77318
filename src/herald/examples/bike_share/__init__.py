"""bike-share: Citi Bike cycles and ride history with an exactly-once PostgreSQL store."""
