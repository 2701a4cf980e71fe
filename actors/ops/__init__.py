"""Operations: the call path's observer seam, the audit trail (writer, file, CLI) and its figures."""
