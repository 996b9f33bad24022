"""What other systems hold, brought into clawrecall: their configuration (`importers.config`)."""
