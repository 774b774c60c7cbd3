"""The same unit of work through SQLAlchemy's ORM Session; prints the seconds commit() took."""
import sys
import time

from sqlalchemy import BigInteger, ForeignKey, Integer, SmallInteger, Text, create_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, relationship


class Base(DeclarativeBase):
    pass


class Department(Base):
    __tablename__ = "department"
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    name: Mapped[str] = mapped_column(Text)
    number: Mapped[int] = mapped_column(Integer)
    employees = relationship("Employee", back_populates="department")


class Employee(Base):
    __tablename__ = "employee"
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    first_name: Mapped[str] = mapped_column(Text)
    last_name: Mapped[str] = mapped_column(Text)
    gender: Mapped[int] = mapped_column(SmallInteger)
    age: Mapped[int] = mapped_column(Integer)
    department_id: Mapped[int] = mapped_column(ForeignKey("department.id"))
    department = relationship("Department", back_populates="employees")


url, n = sys.argv[1].replace("postgresql://", "postgresql+psycopg://", 1), int(sys.argv[2])
engine = create_engine(url)
with Session(engine) as session:
    department = Department(name="Sales", number=1)
    session.add(department)
    for i in range(n):
        session.add(Employee(first_name=f"Emp{i}", last_name=f"Family{i % 977}", gender=1 + i % 2, age=20 + i % 45,
                             department=department))
    start = time.perf_counter()
    session.commit()
    print(time.perf_counter() - start)
