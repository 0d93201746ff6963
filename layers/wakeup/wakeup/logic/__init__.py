"""The service's rules, beneath the HTTP edge (`wakeup.api`) and above the table (`wakeup.table`)."""
